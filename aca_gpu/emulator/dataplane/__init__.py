"""The ACA data plane on the emulator's own host: exec websocket, log stream, system event stream."""
