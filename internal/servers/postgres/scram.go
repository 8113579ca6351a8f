package postgres

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// scramClient is the client side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL
// speaks it: no channel binding, and the user name comes from the startup message, so
// the SCRAM one is empty. The readiness probe needs it because launched servers accept no
// connection without the password, and the package imports no database client.
type scramClient struct {
	password    string
	clientNonce string
	firstBare   string
	authMessage string
	salted      []byte
	verified    bool // the server proved it knows the password too
}

func newSCRAMClient(password string) (*scramClient, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("scram: %w", err)
	}
	return &scramClient{password: password, clientNonce: base64.StdEncoding.EncodeToString(b)}, nil
}

// first returns the client-first-message.
func (s *scramClient) first() []byte {
	s.firstBare = "n=,r=" + s.clientNonce
	return []byte("n,," + s.firstBare)
}

// final reads the server-first-message and returns the client-final-message.
func (s *scramClient) final(serverFirst []byte) ([]byte, error) {
	var nonce, salt string
	iter := 0
	for _, attr := range strings.Split(string(serverFirst), ",") {
		k, v, _ := strings.Cut(attr, "=")
		switch k {
		case "r":
			nonce = v
		case "s":
			salt = v
		case "i":
			iter, _ = strconv.Atoi(v)
		}
	}
	if !strings.HasPrefix(nonce, s.clientNonce) || len(nonce) == len(s.clientNonce) {
		return nil, errors.New("scram: server nonce does not extend ours")
	}
	saltBytes, err := base64.StdEncoding.DecodeString(salt)
	if err != nil || len(saltBytes) == 0 || iter < 1 || iter > 1<<20 {
		return nil, fmt.Errorf("scram: bad server-first-message %q", serverFirst)
	}
	if s.salted, err = pbkdf2.Key(sha256.New, s.password, saltBytes, iter, sha256.Size); err != nil {
		return nil, fmt.Errorf("scram: %w", err)
	}
	withoutProof := "c=biws,r=" + nonce // biws: base64 of the GS2 header "n,,"
	s.authMessage = s.firstBare + "," + string(serverFirst) + "," + withoutProof
	clientKey := hmacSHA256(s.salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	proof := hmacSHA256(storedKey[:], s.authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// verify checks the server-final-message's signature.
func (s *scramClient) verify(serverFinal []byte) error {
	v, ok := bytes.CutPrefix(serverFinal, []byte("v="))
	if !ok || s.salted == nil {
		return fmt.Errorf("scram: bad server-final-message %q", serverFinal)
	}
	want := hmacSHA256(hmacSHA256(s.salted, "Server Key"), s.authMessage)
	got, err := base64.StdEncoding.DecodeString(string(v))
	if err != nil || !hmac.Equal(got, want) {
		return errors.New("scram: the server's signature is wrong")
	}
	s.verified = true
	return nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
