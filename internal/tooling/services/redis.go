package services

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RedisBinary is Debian's redis-server, which scripts/install-tools.sh
// installs with apt (it is not in .tools): the one on PATH.
func RedisBinary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server is not on PATH: run scripts/install-tools.sh as root (Debian's redis-server), or install Redis 7 or Valkey")
	}
	return p, nil
}

// StartRedis starts redis-server on 127.0.0.1 with nothing persisted (no
// RDB snapshots, no AOF), for tests. Its Endpoint is
// redis://127.0.0.1:PORT, which redis.ParseURL reads.
func StartRedis(ctx context.Context, o Options) (*Process, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := startReady(ctx, "redis-server", port, o.LogPath, nil, waitPong(addr), bin,
		"--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--port", strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	p.Endpoint = "redis://" + addr
	return p, nil
}

// waitPong polls addr with PING until the server answers PONG: a dial alone
// could reach whoever else took the port.
func waitPong(addr string) func(context.Context, *Process) error {
	return func(ctx context.Context, p *Process) error {
		return poll(ctx, p, func(context.Context) error { return pong(addr) })
	}
}

func pong(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
