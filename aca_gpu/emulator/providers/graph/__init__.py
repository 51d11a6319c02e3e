"""Microsoft.ResourceGraph: the query subset acagpu sends, over every emulated subscription."""
