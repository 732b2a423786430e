"""blocklab: which storage geometry makes PostgreSQL fastest and cheapest."""

__version__ = "0.1.0"
