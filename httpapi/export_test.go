package httpapi

// ConsoleFS lets the external tests digest the console's templates.
var ConsoleFS = consoleFS
