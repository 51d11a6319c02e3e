"""Microsoft.Storage: storage accounts, their keys and Azure Files shares (`run --create-share`)."""
