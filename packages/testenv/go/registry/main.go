// A registry for one testenv run: go-containerregistry's in-process registry on the address given (the
// run's bridge), blobs on disk under -dir. Its own cmd/registry listens on every interface.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:5000", "host:port to listen on")
	dir := flag.String("dir", "", "directory for blobs (default: memory)")
	flag.Parse()
	options := []registry.Option{registry.Logger(log.New(os.Stderr, "", log.LstdFlags))}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			log.Fatalf("blob directory %s: %v", *dir, err)
		}
		options = append(options, registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)))
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatalf("listen on %s: %v", *address, err)
	}
	log.Printf("serving on %s", listener.Addr())
	server := &http.Server{Handler: registry.New(options...), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.Serve(listener))
}
