package baseline

import "runtime"

// releaseGIL marks a point where the upstream Python code releases the
// GIL: pysqlite wraps every sqlite3 call in Py_BEGIN_ALLOW_THREADS, and a
// thread waiting for the GIL takes it then, so upstream the threads using
// one engine or session interleave at every statement. Go does not
// reschedule on a cgo return by itself (with one P it would run a
// goroutine's statements back to back and hide the race), so the ports
// yield at the same points. It adds no window the Python code lacks.
func releaseGIL() { runtime.Gosched() }
