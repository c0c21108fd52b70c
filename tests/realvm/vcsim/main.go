// Command vcsim serves govmomi's in-memory vCenter simulator for zerto-rewind's real-VM tests.
//
// The vcsim command itself is not packaged by Debian, only the simulator library, so this
// small main is built offline in GOPATH mode by scripts/realvm-setup.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:443", "host:port to serve the SDK on (pyVmomi needs 443)")
	readyFile := flag.String("ready-file", "", "write {\"url\", \"pid\"} JSON here once serving")
	flag.Parse()
	// os.Exit skips deferred calls: run returns instead, so the model's temp dirs are always removed.
	os.Exit(run(*listen, *readyFile))
}

func run(listen, readyFile string) int {
	model := simulator.VPX()
	model.Host = 2 // two standalone hosts beside the cluster: six VMs in all
	if err := model.Create(); err != nil {
		return failed("create model: %v", err)
	}
	defer model.Remove()

	model.Service.Listen = &url.URL{Host: listen}
	model.Service.TLS = new(tls.Config) // no certificate given: the server makes a self-signed one
	server, err := serve(model)
	if err != nil {
		return failed("listen on %s: %v", listen, err)
	}
	defer server.Close()

	// The URL carries the default user:pass; report it without credentials.
	sdk := *server.URL
	sdk.User = nil
	if readyFile != "" {
		if err := writeReady(readyFile, sdk.String()); err != nil {
			return failed("write ready file: %v", err)
		}
	}
	fmt.Printf("vcsim ready %s\n", sdk.String())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return 0
}

// serve starts the SDK server; the library panics when it cannot listen, so turn that into an error.
func serve(model *simulator.Model) (server *simulator.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return model.Service.NewServer(), nil
}

// writeReady writes then renames, so a reader never sees a half-written file.
func writeReady(path, sdkURL string) error {
	ready, err := json.Marshal(map[string]any{"url": sdkURL, "pid": os.Getpid()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", ready, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func failed(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "vcsim: "+format+"\n", args...)
	return 1
}
