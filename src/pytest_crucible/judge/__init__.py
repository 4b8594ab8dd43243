"""The judge engine: typed requests in, stamped verdicts out, one cache in front.

Judges: ``LexicalJudge`` (offline, deterministic, ``lexical-v1``) and
``AnthropicJudge`` (Claude through the official SDK, Message Batches optional).
"""
