// Command etcd is etcd's own server main (etcdmain), built here at the version
// that go.mod pins, so that the test cluster needs no prebuilt etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
