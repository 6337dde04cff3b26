"""Drafter training: the teacher corpus the target labels, the trainers (train-draft) and the
drafter's model card (drafter-card)."""
