package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DynamoDBServer names the server StartDynamoDB starts: dynoxide when
// scripts/install-tools.sh installed it (it does where a dynoxide build is
// published: Linux and macOS, x64 and arm64), else dynalite.
func DynamoDBServer() (string, error) {
	if _, err := Binary("dynoxide"); err == nil {
		return "dynoxide", nil
	}
	if _, err := Binary("dynalite"); err == nil {
		return "dynalite", nil
	}
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	return "", fmt.Errorf("neither dynoxide nor dynalite is installed in %s: run `make tools` (scripts/install-tools.sh)", filepath.Join(dir, "bin"))
}

// StartDynamoDB starts the local DynamoDB that [DynamoDBServer] names: the
// local stack's, on any machine. dynalite keeps o.DBPath's data in a LevelDB
// directory beside it (the path without its extension, plus "-dynalite"),
// and lacks UpdateTimeToLive, which an in-process front on o.Port accepts
// (items do not expire, which the idempotency store does not rely on: it
// checks a record's expiry when it reads it).
func StartDynamoDB(ctx context.Context, o Options) (*Process, error) {
	name, err := DynamoDBServer()
	if err != nil {
		return nil, err
	}
	if name == "dynoxide" {
		return StartDynoxide(ctx, o)
	}
	// The front's port first, so that a taken one fails before dynalite starts.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(o.Port))
	if err != nil {
		return nil, fmt.Errorf("start dynalite: listen on port %d: %w", o.Port, err)
	}
	inner := Options{LogPath: o.LogPath}
	if o.DBPath != "" {
		inner.DBPath = strings.TrimSuffix(o.DBPath, filepath.Ext(o.DBPath)) + "-dynalite"
	}
	p, err := StartDynalite(ctx, inner)
	if err != nil {
		l.Close()
		return nil, err
	}
	upstream, _ := url.Parse(p.Endpoint)
	p.front = &http.Server{Handler: ttlFront(httputil.NewSingleHostReverseProxy(upstream)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.front.Serve(l) }()
	p.Endpoint = "http://" + l.Addr().String()
	return p, nil
}

// ttlFront answers UpdateTimeToLive as DynamoDB does (with the
// specification it was given) and passes every other request to next.
func ttlFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "DynamoDB_20120810.UpdateTimeToLive" {
			next.ServeHTTP(w, r)
			return
		}
		var in struct {
			TableName               string
			TimeToLiveSpecification json.RawMessage
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in)
		if err == nil && (in.TableName == "" || len(in.TimeToLiveSpecification) == 0) {
			err = errors.New("TableName and TimeToLiveSpecification are required")
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			msg, _ := json.Marshal(err.Error())
			fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":%s}`, msg)
			return
		}
		fmt.Fprintf(w, `{"TimeToLiveSpecification":%s}`, in.TimeToLiveSpecification)
	})
}
