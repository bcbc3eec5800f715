"""hopsd.ledger"""
