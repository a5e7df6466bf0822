package source

// ManifestError is a static pod file that could not be used.
type ManifestError struct {
	Path string
	Err  error
}

func (e *ManifestError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *ManifestError) Unwrap() error { return e.Err }
