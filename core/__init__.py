"""Runtime pieces both apps use and that configure nothing: threads for blocking iterators,
backpressure on streamed responses, giving memory back to the system, the Server-Timing header."""
