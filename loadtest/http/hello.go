// hello: the Go net/http peer of goro-demo for loadtest/run.sh. Standard library only;
// the same routes and bytes as goro-demo:
//
//	GET  /, /plaintext  "Hello, World!"     GET /json  {"message":"Hello, World!"}
//	POST /echo          the body, with its Content-Type
//	GET  /sleep?ms=N    time.Sleep (parks the goroutine), then "ok"
//	GET  /block?ms=N    a real blocking nanosleep system call (the runtime hands the P
//	                    to another thread meanwhile), then "ok"
//	GET  /cpu?ms=N      N ms of CPU in a loop that never blocks (the runtime preempts it)
//	GET  /healthz       "ok"
//
//	GO111MODULE=off go build -o hello hello.go
//	./hello [-addr 127.0.0.1:8081] [-tls-cert cert.pem -tls-key key.pem]
//	./hello 127.0.0.1:8081
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// queryMS is the integer query parameter ms: fallback when absent, capped at max; ok
// is false (and a 400 naming the problem written) when it is not a number.
func queryMS(w http.ResponseWriter, r *http.Request, fallback, max int64) (int64, bool) {
	v := r.URL.Query().Get("ms")
	if v == "" {
		return fallback, true
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil && !isRange(err) {
		http.Error(w, "400 Bad Request: query parameter ms must be a non-negative integer", 400)
		return 0, false
	}
	if err != nil || int64(n) > max {
		return max, true
	}
	return int64(n), true
}

func isRange(err error) bool {
	e, ok := err.(*strconv.NumError)
	return ok && e.Err == strconv.ErrRange
}

func text(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, body)
}

func routes(root string) *http.ServeMux {
	mux := http.NewServeMux()
	hello := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" && r.URL.Path != "/plaintext" {
			http.NotFound(w, r)
			return
		}
		text(w, "Hello, World!")
	}
	mux.HandleFunc("/", hello)
	mux.HandleFunc("/plaintext", hello)
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"message":"Hello, World!"}`)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err != nil {
			http.Error(w, "413 body too large", http.StatusRequestEntityTooLarge)
			return
		}
		t := r.Header.Get("Content-Type")
		if t == "" {
			t = "application/octet-stream"
		}
		w.Header().Set("Content-Type", t)
		w.Write(body)
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		if ms, ok := queryMS(w, r, 100, 60000); ok {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			text(w, "ok")
		}
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		if ms, ok := queryMS(w, r, 100, 60000); ok {
			ts := syscall.NsecToTimespec(ms * int64(time.Millisecond))
			for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
			}
			text(w, "ok")
		}
	})
	mux.HandleFunc("/cpu", func(w http.ResponseWriter, r *http.Request) {
		if ms, ok := queryMS(w, r, 10, 10000); ok {
			until := time.Now().Add(time.Duration(ms) * time.Millisecond)
			spins := 0
			for time.Now().Before(until) {
				spins++
			}
			text(w, fmt.Sprintf("spun %d times in %d ms\n", spins, ms))
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { text(w, "ok") })
	if root != "" {
		mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(root))))
	}
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	cert := flag.String("tls-cert", "", "PEM certificate: serve HTTPS (with -tls-key)")
	key := flag.String("tls-key", "", "PEM private key of -tls-cert")
	root := flag.String("root", "", "serve the files under this folder at /static/ (http.FileServer)")
	flag.Parse()
	if flag.NArg() > 0 {
		*addr = flag.Arg(0)
	}
	if (*cert == "") != (*key == "") {
		log.Fatal("hello: -tls-cert and -tls-key go together")
	}
	server := &http.Server{Addr: *addr, Handler: routes(*root)}
	if *cert == "" {
		log.Printf("hello: serving http://%s", *addr)
		log.Fatal(server.ListenAndServe())
	}
	server.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	log.Printf("hello: serving https://%s", *addr)
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
