"""Bringing a pre-empted job back (`launch --requeue`): the pre-emption decisions per scheduler
(preempt), the batch script kept before the ranks start (keptscript), and the steps carried out
(bring_back)."""
