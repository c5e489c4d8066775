//go:build !linux

package services

import "syscall"

// procAttr puts a server in its own process group, so that Stop ends it and
// anything it spawned. Only Linux has a parent-death signal: elsewhere
// (macOS) a server outlives a starter killed by SIGKILL; Ctrl-C and
// SIGTERM still stop everything.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
