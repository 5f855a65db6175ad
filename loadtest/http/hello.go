// hello: the Go net/http peer of goro-demo for loadtest/http/run.sh. Standard library
// only; same routes and bytes as goro-demo's /plaintext and /json.
//
//	GO111MODULE=off go build -o hello hello.go && ./hello 127.0.0.1:8081
package main

import (
	"log"
	"net/http"
	"os"
)

func main() {
	addr := "127.0.0.1:8081"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	hello := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("Hello, World!"))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/plaintext", hello)
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"message":"Hello, World!"}`))
	})
	log.Printf("hello: serving http://%s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
