package lifecycle

// Invariant reports the first invariant of the kernel's phase that k
// breaks (phase.go), or nil.
func Invariant(k *Kernel) error { return k.invariant() }
