// A RISC receiver written the way a competent Go engineer would write one from Google's sample:
// net/http, golang-jwt, the issuer's keys held in memory. Issue 30's peers for `risc bench serve
// --compare`; not part of risc.
//
//	-mode memory      SETs kept in a map only (lost on a crash)
//	-mode durable     SQLite WAL, synchronous=FULL, one writer goroutine committing whatever is
//	                  waiting in one transaction; 202 after the commit
//	-mode autocommit  one INSERT a request, committed on its own; 202 after it
//
// GET /stats answers {"stored": N}: rows kept, to compare with what was acknowledged.
package main

import (
	"crypto/rsa"
	"crypto/tls"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"sync"

	"github.com/golang-jwt/jwt"
	_ "github.com/mattn/go-sqlite3"
)

type jwkSet struct {
	Keys []struct {
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		N   string `json:"n"`
		E   string `json:"e"`
	} `json:"keys"`
}

func loadKeys(path string) map[string]*rsa.PublicKey {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var set jwkSet
	if err := json.Unmarshal(data, &set); err != nil {
		log.Fatal(err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, _ := base64.RawURLEncoding.DecodeString(k.N)
		e, _ := base64.RawURLEncoding.DecodeString(k.E)
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys
}

type record struct {
	iss, jti, token string
	done            chan error
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18443", "listen address")
	jwksPath := flag.String("jwks", "keys/test/jwks.json", "JWK Set file")
	audience := flag.String("aud", "risc-test-client.apps.googleusercontent.com", "accepted audience")
	issuer := flag.String("iss", "https://accounts.google.com/", "accepted issuer")
	mode := flag.String("mode", "memory", "memory, durable or autocommit")
	dbPath := flag.String("db", "peer.sqlite3", "SQLite file (durable, autocommit)")
	certFile := flag.String("cert", "", "PEM certificate: serve HTTPS (TLS 1.2+) with -key")
	keyFile := flag.String("key", "", "PEM private key for -cert")
	flag.Parse()
	keys := loadKeys(*jwksPath)

	var mu sync.Mutex
	memory := map[string]bool{}
	var db *sql.DB
	writes := make(chan record, 4096)
	if *mode != "memory" {
		var err error
		db, err = sql.Open("sqlite3", *dbPath+"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000")
		if err != nil {
			log.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS sets (iss TEXT, jti TEXT, token TEXT, PRIMARY KEY (iss, jti))"); err != nil {
			log.Fatal(err)
		}
	}
	if *mode == "durable" {
		db.SetMaxOpenConns(1)
		go func() {
			for first := range writes {
				batch := []record{first}
			drain:
				for {
					select {
					case next := <-writes:
						batch = append(batch, next)
					default:
						break drain
					}
				}
				tx, err := db.Begin()
				if err == nil {
					for _, r := range batch {
						if _, err = tx.Exec("INSERT OR IGNORE INTO sets VALUES (?, ?, ?)", r.iss, r.jti, r.token); err != nil {
							break
						}
					}
					if err == nil {
						err = tx.Commit()
					} else {
						tx.Rollback()
					}
				}
				for _, r := range batch {
					r.done <- err
				}
			}
		}()
	}

	// SETs describe past events: no exp check (golang-jwt's claims validation is off).
	parser := jwt.Parser{ValidMethods: []string{"RS256"}, SkipClaimsValidation: true}
	refuse := func(w http.ResponseWriter, code, description string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"err": code, "description": description})
	}
	http.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			refuse(w, "invalid_request", "unreadable body")
			return
		}
		claims := jwt.MapClaims{}
		token, err := parser.ParseWithClaims(string(body), claims, func(t *jwt.Token) (interface{}, error) {
			if t.Method != jwt.SigningMethodRS256 {
				return nil, errors.New("alg not allowed")
			}
			kid, _ := t.Header["kid"].(string)
			if key, ok := keys[kid]; ok {
				return key, nil
			}
			return nil, errors.New("unknown kid")
		})
		if err != nil || !token.Valid {
			refuse(w, "invalid_key", "signature does not verify")
			return
		}
		if !claims.VerifyIssuer(*issuer, true) {
			refuse(w, "invalid_issuer", "wrong iss")
			return
		}
		if !claims.VerifyAudience(*audience, true) {
			refuse(w, "invalid_audience", "wrong aud")
			return
		}
		jti, _ := claims["jti"].(string)
		if _, ok := claims["events"].(map[string]interface{}); !ok || jti == "" {
			refuse(w, "invalid_request", "no events or jti")
			return
		}
		switch *mode {
		case "memory":
			mu.Lock()
			memory[jti] = true
			mu.Unlock()
		case "durable":
			done := make(chan error, 1)
			writes <- record{*issuer, jti, string(body), done}
			if err := <-done; err != nil {
				http.Error(w, "store failing", http.StatusServiceUnavailable)
				return
			}
		default:
			if _, err := db.Exec("INSERT OR IGNORE INTO sets VALUES (?, ?, ?)", *issuer, jti, string(body)); err != nil {
				http.Error(w, "store failing", http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
	http.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		stored := 0
		if db != nil {
			db.QueryRow("SELECT count(*) FROM sets").Scan(&stored)
		} else {
			mu.Lock()
			stored = len(memory)
			mu.Unlock()
		}
		json.NewEncoder(w).Encode(map[string]int{"stored": stored})
	})
	if *certFile != "" {
		server := &http.Server{Addr: *addr, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
		log.Fatal(server.ListenAndServeTLS(*certFile, *keyFile))
	}
	log.Fatal(http.ListenAndServe(*addr, nil))
}
