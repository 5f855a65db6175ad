// users: the Go peer of goro-json-users (examples/json_users) for loadtest/http/json/run.sh.
// Standard library only; the same routes and the same bytes, with encoding/json doing
// per request what goro::json (nlohmann/json) does in the goro server:
//
//	GET    /users         [{"email":...,"id":1,"name":...}, ...]
//	POST   /users         {"name":...,"email":...} -> 201 + Location, the stored user
//	GET    /users/{id}    the user, or 404 {"error":"no user 7"}
//	PUT    /users/{id}    replace (200) or create (201)
//	DELETE /users/{id}    204, or 404
//
// Bad bodies get what goro's decode_or_400 sends: 415 for a Content-Type that is not
// JSON, 413 past 16 MiB, 400 {"error": "..."} otherwise.
//
//	GO111MODULE=off go build -o users users.go
//	./users [-addr 127.0.0.1:8081]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"log"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Fields in alphabetical order, so that the bytes are those of nlohmann::json, which
// keeps an object's members sorted.
type User struct {
	Email string `json:"email"`
	ID    int64  `json:"id"`
	Name  string `json:"name"`
}

type store struct {
	mu     sync.Mutex
	users  map[int64]User // guarded by mu
	nextID int64          // guarded by mu
}

func writeJSON(w http.ResponseWriter, v any, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // compact, then "\n"
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, map[string]string{"error": msg}, status)
}

// decode is goro's decode_or_400: the Content-Type, the size limit, one JSON value, the
// shape (name and email present).
func decode(w http.ResponseWriter, r *http.Request, u *User) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
			writeError(w, http.StatusUnsupportedMediaType, "Content-Type "+ct+" is not JSON (application/json)")
			return false
		}
	}
	var in struct {
		Name  *string `json:"name"`
		Email *string `json:"email"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20))
	if err := dec.Decode(&in); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		} else {
			writeError(w, http.StatusBadRequest, err.Error())
		}
		return false
	}
	if in.Name == nil || in.Email == nil {
		writeError(w, http.StatusBadRequest, "JSON of the wrong shape: name and email are required")
		return false
	}
	if *in.Name == "" || *in.Email == "" {
		writeError(w, http.StatusBadRequest, "name and email must not be empty")
		return false
	}
	u.Name, u.Email = *in.Name, *in.Email
	return true
}

func (s *store) collection(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.mu.Lock()
		all := make([]User, 0, len(s.users))
		for _, u := range s.users {
			all = append(all, u)
		}
		s.mu.Unlock()
		sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
		writeJSON(w, all, http.StatusOK)
	case http.MethodPost:
		var u User
		if !decode(w, r, &u) {
			return
		}
		s.mu.Lock()
		u.ID = s.nextID
		s.nextID++
		s.users[u.ID] = u
		s.mu.Unlock()
		w.Header().Set("Location", "/users/"+strconv.FormatInt(u.ID, 10))
		writeJSON(w, u, http.StatusCreated)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func (s *store) item(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/users/"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "the user id must be a positive integer")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.mu.Lock()
		u, ok := s.users[id]
		s.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "no user "+strconv.FormatInt(id, 10))
			return
		}
		writeJSON(w, u, http.StatusOK)
	case http.MethodPut:
		var u User
		if !decode(w, r, &u) {
			return
		}
		u.ID = id
		s.mu.Lock()
		_, existed := s.users[id]
		s.users[id] = u
		if id >= s.nextID {
			s.nextID = id + 1
		}
		s.mu.Unlock()
		status := http.StatusOK
		if !existed {
			status = http.StatusCreated
		}
		writeJSON(w, u, status)
	case http.MethodDelete:
		s.mu.Lock()
		_, ok := s.users[id]
		delete(s.users, id)
		s.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "no user "+strconv.FormatInt(id, 10))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "DELETE, GET, HEAD, PUT")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	flag.Parse()
	s := &store{users: map[int64]User{}, nextID: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("/users", s.collection)
	mux.HandleFunc("/users/", s.item)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
