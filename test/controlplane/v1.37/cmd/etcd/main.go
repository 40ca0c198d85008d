// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3/etcdmain), built at the
// version k8s.io/kubernetes v1.37.2 requires, for the local e2e control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
