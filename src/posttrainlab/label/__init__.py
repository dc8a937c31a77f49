"""Labelling: Monte-Carlo values per reasoning prefix (``mc``) and LLM-judge ``<HAL>`` annotation (``annotate``).

Layer: ``label`` sits beside ``train``/``eval``/``serve`` and builds on ``generation``, ``data`` and ``grading``.
"""
