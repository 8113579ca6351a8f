package postgres

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// probe logs in over the PostgreSQL v3 protocol as user on db with password
// (SCRAM-SHA-256), runs "select 1" and says goodbye. A nil error means the server accepts
// clients for real: it is not merely listening, not starting up or recovering.
func probe(ctx context.Context, addr, user, password, db string) error {
	_, err := queryFirst(ctx, 2*time.Second, addr, user, password, db, "select 1")
	return err
}

// queryFirst logs in like probe, runs query (one statement, simple protocol) within
// timeout and returns the text of the first column of its first row: "" when
// there is no row or the value is NULL.
func queryFirst(ctx context.Context, timeout time.Duration, addr, user, password, db, query string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))

	var params bytes.Buffer
	for _, s := range []string{"user", user, "database", db, ""} {
		params.WriteString(s)
		params.WriteByte(0)
	}
	startup := binary.BigEndian.AppendUint32(nil, uint32(8+params.Len()))
	startup = binary.BigEndian.AppendUint32(startup, 3<<16)
	startup = append(startup, params.Bytes()...)
	if _, err := c.Write(startup); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if err := readUntilReady(r, c, password, nil); err != nil {
		return "", err
	}
	if _, err := c.Write(pgMessage('Q', append([]byte(query), 0))); err != nil {
		return "", err
	}
	var first string
	seen := false
	err = readUntilReady(r, c, password, func(row []byte) {
		if !seen {
			first, seen = firstField(row), true
		}
	})
	if err != nil {
		return "", err
	}
	_, _ = c.Write([]byte{'X', 0, 0, 0, 4})
	return first, nil
}

// firstField returns the text of the first column of a DataRow body ("" for NULL or a
// malformed row).
func firstField(row []byte) string {
	if len(row) < 6 || binary.BigEndian.Uint16(row) == 0 {
		return ""
	}
	n := int32(binary.BigEndian.Uint32(row[2:]))
	if n < 0 || int(n) > len(row)-6 {
		return ""
	}
	return string(row[6 : 6+n])
}

// pgMessage frames a typed frontend message.
func pgMessage(typ byte, body []byte) []byte {
	m := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))...)
	return append(m, body...)
}

// readUntilReady reads backend messages up to ReadyForQuery, failing on an ErrorResponse,
// and hands the body of each DataRow to row when it is not nil. It answers a SCRAM-SHA-256 exchange on w with password, and refuses any other
// authentication (a server that asks for none, or for a cleartext password, is not the
// one launched).
func readUntilReady(r *bufio.Reader, w io.Writer, password string, row func([]byte)) error {
	var hdr [5]byte
	var sc *scramClient
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n < 4 || n > 1<<20 {
			return fmt.Errorf("bad message length %d", n)
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		switch hdr[0] {
		case 'Z':
			return nil
		case 'D':
			if row != nil {
				row(body)
			}
		case 'E':
			return errors.New(pgErrorText(body))
		case 'R':
			if len(body) < 4 {
				return errors.New("short authentication request")
			}
			var reply []byte
			var err error
			switch code := binary.BigEndian.Uint32(body); {
			case code == 0:
				if sc == nil || !sc.verified {
					return errors.New("server let us in without SCRAM authentication")
				}
			case code == 10 && sc == nil:
				if !bytes.Contains(body[4:], []byte("SCRAM-SHA-256\x00")) {
					return fmt.Errorf("server offers %q, not SCRAM-SHA-256", body[4:])
				}
				if sc, err = newSCRAMClient(password); err != nil {
					return err
				}
				first := sc.first()
				reply = append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
				reply = pgMessage('p', append(reply, first...))
			case code == 11 && sc != nil:
				final, err := sc.final(body[4:])
				if err != nil {
					return err
				}
				reply = pgMessage('p', final)
			case code == 12 && sc != nil:
				if err := sc.verify(body[4:]); err != nil {
					return err
				}
			default:
				return fmt.Errorf("unexpected authentication request %d", code)
			}
			if reply != nil {
				if _, err := w.Write(reply); err != nil {
					return err
				}
			}
		}
	}
}

// pgErrorText renders an ErrorResponse's SQLSTATE and message fields.
func pgErrorText(body []byte) string {
	var code, msg string
	for _, f := range bytes.Split(body, []byte{0}) {
		if len(f) < 1 {
			continue
		}
		switch f[0] {
		case 'C':
			code = string(f[1:])
		case 'M':
			msg = string(f[1:])
		}
	}
	return fmt.Sprintf("server error %s: %s", code, msg)
}
