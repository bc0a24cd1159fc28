// A registry for tests, the demo and one testenv run: go-containerregistry's in-process registry on the address
// given, blobs on disk under -dir. Its own cmd/registry listens on every interface and has no auth.
//
// Options beyond go-containerregistry's: -tls-cert/-tls-key serve HTTPS; -user/-password turn on the Docker token
// flow (a 401 with `WWW-Authenticate: Bearer realm=…,service=…,scope=…`, a token endpoint that checks Basic
// credentials and grants the scope asked for, tokens checked per repository and action). Blobs are served as
// stored, like a registry on a filesystem store: a corrupted file reaches the client, which must catch it.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// storedBlobs keeps blobs in dir/<algorithm>/<hex> and serves them without re-hashing (go-containerregistry's
// disk handler re-hashes on every read and answers 404 for a damaged blob, which hides the damage).
type storedBlobs struct{ dir string }

func (s storedBlobs) path(h v1.Hash) string { return filepath.Join(s.dir, h.Algorithm, h.Hex) }

func (s storedBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	info, err := os.Stat(s.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return 0, registry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

func (s storedBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(s.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, registry.ErrNotFound
	}
	return f, err
}

// Put writes through a temporary file; the reader given verifies the digest at EOF, so a wrong upload never
// lands under its claimed digest.
func (s storedBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	if err := os.MkdirAll(filepath.Join(s.dir, h.Algorithm), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, "upload-*")
	if err != nil {
		return err
	}
	_, copyErr := io.Copy(f, rc)
	closeErr := f.Close()
	if err := errors.Join(copyErr, closeErr); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), s.path(h))
}

func (s storedBlobs) Delete(_ context.Context, _ string, h v1.Hash) error {
	return os.Remove(s.path(h))
}

// tokenAuth is the Docker registry token flow in one process: the registry and its token service.
type tokenAuth struct {
	user, password, realm, service string
	mu                             sync.Mutex
	tokens                         map[string]grant
}

type grant struct {
	scopes  []string
	expires time.Time
}

const tokenLifetime = 5 * time.Minute

// scopeOf says which repository and action a registry request needs ("" for the version check and the catalog).
func scopeOf(req *http.Request) (repository, action string) {
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	if path == req.URL.Path || path == "" || path == "_catalog" {
		return "", ""
	}
	cut := -1
	for _, marker := range []string{"/blobs/uploads", "/blobs/", "/manifests/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(path, marker); i > 0 {
			cut = i
			break
		}
	}
	if cut < 0 {
		return "", ""
	}
	action = "pull"
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		action = "push"
	}
	return path[:cut], action
}

func (a *tokenAuth) challenge(w http.ResponseWriter, repository, action string) {
	value := fmt.Sprintf(`Bearer realm=%q,service=%q`, a.realm, a.service)
	if repository != "" {
		value += fmt.Sprintf(`,scope="repository:%s:%s"`, repository, action)
	}
	w.Header().Set("WWW-Authenticate", value)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}`+"\n")
}

func (a *tokenAuth) allowed(token, repository, action string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.tokens[token]
	if !ok || time.Now().After(g.expires) {
		return false
	}
	if repository == "" {
		return true
	}
	for _, scope := range g.scopes {
		parts := strings.Split(scope, ":")
		if len(parts) != 3 || parts[0] != "repository" || parts[1] != repository {
			continue
		}
		for _, granted := range strings.Split(parts[2], ",") {
			// A push grant includes pull, as registries grant "pull,push" together.
			if granted == action || granted == "*" || (action == "pull" && granted == "push") {
				return true
			}
		}
	}
	return false
}

// issue answers the token endpoint: Basic credentials in, a bearer token for the scopes asked for out.
func (a *tokenAuth) issue(w http.ResponseWriter, req *http.Request) {
	user, password, ok := req.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(a.user)) != 1 ||
		subtle.ConstantTimeCompare([]byte(password), []byte(a.password)) != 1 {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Basic realm=%q`, a.service))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"errors":[{"code":"UNAUTHORIZED","message":"wrong user name or password"}]}`)
		log.Printf("token: refused credentials of %q", user)
		return
	}
	if service := req.URL.Query().Get("service"); service != "" && service != a.service {
		http.Error(w, fmt.Sprintf("unknown service %q", service), http.StatusBadRequest)
		return
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	token := hex.EncodeToString(raw)
	scopes := req.URL.Query()["scope"]
	issued := time.Now()
	a.mu.Lock()
	for known, g := range a.tokens {
		if issued.After(g.expires) {
			delete(a.tokens, known)
		}
	}
	a.tokens[token] = grant{scopes: scopes, expires: issued.Add(tokenLifetime)}
	a.mu.Unlock()
	log.Printf("token: issued for %q scopes %q", user, scopes)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"token":        token,
		"access_token": token,
		"expires_in":   int(tokenLifetime.Seconds()),
		"issued_at":    issued.UTC().Format(time.RFC3339),
	})
}

func (a *tokenAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/token" {
			a.issue(w, req)
			return
		}
		repository, action := scopeOf(req)
		header := req.Header.Get("Authorization")
		token, isBearer := strings.CutPrefix(header, "Bearer ")
		if !isBearer || !a.allowed(token, repository, action) {
			log.Printf("%s %s 401 (no token for repository %q %s)", req.Method, req.URL, repository, action)
			a.challenge(w, repository, action)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func main() {
	address := flag.String("address", "127.0.0.1:5000", "host:port to listen on")
	dir := flag.String("dir", "", "directory for blobs (default: memory)")
	certFile := flag.String("tls-cert", "", "serve HTTPS with this certificate (PEM; needs -tls-key)")
	keyFile := flag.String("tls-key", "", "private key of -tls-cert (PEM)")
	user := flag.String("user", "", "require a bearer token, issued at /token for this user (needs -password)")
	password := flag.String("password", "", "the password of -user")
	service := flag.String("service", "skr-testenv-registry", "service name in token challenges")
	flag.Parse()
	if (*certFile == "") != (*keyFile == "") {
		log.Fatal("-tls-cert and -tls-key go together")
	}
	if (*user == "") != (*password == "") {
		log.Fatal("-user and -password go together")
	}

	options := []registry.Option{registry.Logger(log.New(os.Stderr, "", log.LstdFlags))}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			log.Fatalf("blob directory %s: %v", *dir, err)
		}
		options = append(options, registry.WithBlobHandler(storedBlobs{dir: *dir}))
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatalf("listen on %s: %v", *address, err)
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	handler := registry.New(options...)
	if *user != "" {
		realm := fmt.Sprintf("%s://%s/token", scheme, listener.Addr())
		handler = (&tokenAuth{
			user: *user, password: *password, realm: realm, service: *service, tokens: map[string]grant{},
		}).wrap(handler)
	}
	log.Printf("serving %s on %s", scheme, listener.Addr())
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if *certFile != "" {
		log.Fatal(server.ServeTLS(listener, *certFile, *keyFile))
	}
	log.Fatal(server.Serve(listener))
}
