package services

import "syscall"

// procAttr puts a server in its own process group, so that Stop ends it and
// anything it spawned, and has the kernel kill it if the process that
// started it dies first (a test binary killed by a timeout, make dev by
// SIGKILL).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
