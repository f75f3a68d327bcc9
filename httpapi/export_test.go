package httpapi

// ConsoleFS lets the external tests digest the console's templates.
var ConsoleFS = consoleFS

// LeanAnswers is how many requests the callbacks' lean path answered.
func LeanAnswers() int64 { return leanAnswers.Load() }
