"""acagpu's resource groups as a fleet: which subscriptions a command looks at and the groups in them
(`groups`), what they are and cost so far (`status`), removing one run (`down`) and the expired ones
(`reap`, deleting at scale in `reap_delete`)."""
