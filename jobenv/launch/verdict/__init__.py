"""What an attempt's verdict (jobenv.rank.verdict, decided once) means in words and for the
hosts: the failure summary (summary), which host a failure retires (failover) and the job's
ledger of retired hosts (badhosts)."""
