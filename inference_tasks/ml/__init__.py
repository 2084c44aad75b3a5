"""Training on the `training` queue and the classifier heads and corpus pages it keeps in Redis."""
