"""The HTTP edge below the app: the only code that knows uvicorn's internals (the bounded
protocol, the pacing of answers) and the processes it runs in (workers and their
supervisor, the ports they hold)."""
