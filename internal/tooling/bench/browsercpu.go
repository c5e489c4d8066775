package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is Linux's USER_HZ, the unit of /proc's utime and stime.
const clockTicks = 100

// cpuShares is CPU seconds by where they were spent under a browser
// driver: Chromium's processes by their --type ("browser",
// "network", "gpu", …, "driver" for node), and the renderers' threads by
// name ("renderer: main thread" is the page's, "renderer:
// DedicatedWorker" its workers, where the client hashes).
type cpuShares map[string]float64

// treeCPU reads the CPU time of every live process descended from root
// (itself included) from /proc: playwright starts Chromium in a process
// group of its own, so the driver's group alone would miss it. On a
// machine others share, CPU seconds say more about a way's own cost than
// its wall time does.
func treeCPU(root int) cpuShares {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	parent := map[int]int{}
	stats := map[int]procStat{}
	for _, dir := range procs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if st, ok := readStat(filepath.Join(dir, "stat")); ok {
			parent[pid], stats[pid] = st.ppid, st
		}
	}
	under := func(pid int) bool {
		for range 64 { // deeper than any process tree here
			if pid == root {
				return true
			}
			next, ok := parent[pid]
			if !ok || next == pid || next == 0 {
				return false
			}
			pid = next
		}
		return false
	}
	out := cpuShares{}
	for pid, st := range stats {
		if !under(pid) {
			continue
		}
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		kind := processKind(dir)
		if kind != "renderer" {
			out[kind] += st.seconds
			continue
		}
		// A thread that ended (a hashing worker the client closed) leaves
		// its time in the process's total only.
		ended := st.seconds
		tasks, _ := filepath.Glob(filepath.Join(dir, "task", "[0-9]*"))
		for _, t := range tasks {
			if ts, ok := readStat(filepath.Join(t, "stat")); ok {
				out["renderer: "+threadGroup(ts.comm)] += ts.seconds
				ended -= ts.seconds
			}
		}
		out["renderer: threads that ended (workers)"] += max(ended, 0)
	}
	return out
}

// minus is the CPU spent between two readings.
func (c cpuShares) minus(before cpuShares) cpuShares {
	out := cpuShares{}
	for k, v := range c {
		if d := v - before[k]; d > 0.005 {
			out[k] = d
		}
	}
	return out
}

type procStat struct {
	comm    string
	ppid    int
	seconds float64
}

// readStat parses /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat: the
// name (in parentheses, which may hold spaces), the parent (field 4) and
// utime + stime (fields 14 and 15).
func readStat(path string) (procStat, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, false
	}
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[end+1:]))
	// f[0] is field 3 (state).
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return procStat{comm: string(raw[open+1 : end]), ppid: ppid, seconds: (ut + sys) / clockTicks}, true
}

// processKind names a driver's process by Chromium's --type (and the
// utility process's sub-type), or "driver" for node.
func processKind(dir string) string {
	raw, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	// Chromium's children rewrite their command line as one string, spaces between the arguments.
	args := strings.FieldsFunc(string(raw), func(r rune) bool { return r == 0 || r == ' ' })
	if len(args) > 0 && filepath.Base(args[0]) == "node" {
		return "driver"
	}
	kind, sub := "browser", ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--type="); ok {
			kind = v
		}
		if v, ok := strings.CutPrefix(a, "--utility-sub-type="); ok {
			sub = v
		}
	}
	switch {
	case kind == "utility" && strings.Contains(sub, "NetworkService"):
		return "network"
	case kind == "utility" && strings.Contains(sub, "Storage"):
		return "storage"
	case kind == "gpu-process":
		return "gpu"
	}
	return kind
}

// threadGroup folds a thread's name into its kind: Chromium numbers its
// pool threads ("ThreadPoolForeg" and the like, truncated to 15 bytes).
func threadGroup(comm string) string {
	switch {
	case comm == "chromium":
		// The process's first thread keeps the executable's name.
		return "main thread"
	case strings.HasPrefix(comm, "DedicatedWorker"):
		return "DedicatedWorker"
	case strings.HasPrefix(comm, "ThreadPool"):
		return "ThreadPool"
	}
	return comm
}
