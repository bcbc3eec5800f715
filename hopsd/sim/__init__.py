"""hopsd.sim"""
