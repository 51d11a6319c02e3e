"""Microsoft.Authorization: role definitions, role assignments, the caller's permissions, and the check."""
