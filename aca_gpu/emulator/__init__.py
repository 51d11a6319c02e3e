"""ARM + ACA data-plane emulator. Imports nothing from cli/, workflow/ or azure/."""
