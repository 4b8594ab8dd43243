"""Golden items: what a golden set is (``schema``), where items come from (a ``corpus`` and
``generate``/``lexical`` drafts, ``promote``d reviews) and how a person accepts them (``review``)."""
