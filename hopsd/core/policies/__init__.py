"""Scheduling policies behind one interface: hops and the baselines it is measured against."""
