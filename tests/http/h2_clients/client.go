// Go's net/http client against goro over TLS: HTTP/2 is chosen through ALPN, as a Go
// program gets it by default. Usage: go run client.go <https URL> <CA file>. Sends 20
// concurrent GETs and a 256 KiB POST; prints "ok" and exits 0 when every answer is right
// and came over HTTP/2, else prints what was wrong and exits 1. Standard library only.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func fail(format string, args ...interface{}) {
	fmt.Printf(format+"\n", args...)
	os.Exit(1)
}

func main() {
	base, caFile := os.Args[1], os.Args[2]
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fail("read CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "localhost"},
			ForceAttemptHTTP2: true,
		},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 21)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := client.Get(fmt.Sprintf("%s/hello?name=%d", base, i))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != fmt.Sprintf("hello %d", i) {
				errs <- fmt.Sprintf("GET %d: %s %d %q", i, resp.Proto, resp.StatusCode, body)
			}
		}(i)
	}
	wg.Wait()
	big := strings.Repeat("g", 256*1024)
	resp, err := client.Post(base+"/echo", "text/plain", bytes.NewBufferString(big))
	if err != nil {
		fail("POST: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(body) != big {
		errs <- fmt.Sprintf("POST: %s %d, %d bytes", resp.Proto, resp.StatusCode, len(body))
	}
	close(errs)
	for e := range errs {
		fail("%s", e)
	}
	fmt.Println("ok")
}
