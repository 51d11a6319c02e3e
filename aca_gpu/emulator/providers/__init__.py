"""ARM resource providers: each is urls → responses → models → exceptions."""
