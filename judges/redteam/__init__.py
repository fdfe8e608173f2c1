"""The red team the project runs on itself (`foundry redteam`, docs/reward-integrity.md):
attacks by class that implement nothing, graded as any attempt is; each must score 0 and be
shown to have run."""
