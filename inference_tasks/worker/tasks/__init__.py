"""The public tasks (wire names `inference.*`, routing.py) and the steps they share."""
