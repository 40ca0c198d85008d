// The test node's pause image: a static binary that sleeps until SIGTERM/SIGINT and exits 0
// (the pod sandbox, and test containers that really start). `/pause 3s` sleeps 3 s and exits 0
// instead (an init container that completes); `/pause 3s 7` exits 7.
package main

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	if len(os.Args) < 2 {
		<-c
		return
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		os.Stderr.WriteString("usage: pause [DURATION [EXIT_CODE]]\n")
		os.Exit(2)
	}
	code := 0
	if len(os.Args) > 2 {
		code, _ = strconv.Atoi(os.Args[2])
	}
	select {
	case <-c:
	case <-time.After(d):
	}
	os.Exit(code)
}
