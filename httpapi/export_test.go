package httpapi

// ConsoleFS lets the external tests digest the console's templates.
var ConsoleFS = consoleFS

// CallbackAnswers is how many requests the callbacks' callback path answered.
func CallbackAnswers() int64 { return callbackAnswers.Load() }
