"""Dataset cards: every folder of data the lab writes carries a ``README.md`` in the Hub's dataset-card form.

- ``render``: the parts every card shares (YAML front matter with ``configs`` and ``dataset_info``, the
  Provenance and Files sections, and the readers of both); the arith-v1 card uses them too.
- ``features``: the ``features`` of a file, read from its rows; one pass gives rows, types, bytes and SHA-256.
- ``card``: ``CardSpec`` -> card text, recounted from the files; ``card_provenance``; ``verify_card``.
- ``sections``: the seeds' tables (step labels, first errors, spans, MC values, columns), ``json_object`` (a side
  file); ``about``: what each kind says about itself, written once in ``about.yaml`` (title, summary, the Hub's
  metadata, the meaning of each column).
- ``labels``, ``runs``: one spec per kind of folder.
- ``kinds``: the kinds, ``detect_kind``, ``write_folder_card`` (what each writer calls), ``publish_pairs``,
  ``verify_folder`` (``posttrain data verify``).
- ``check``: the offline checks of ``huggingface_hub`` and ``datasets`` on a card.

docs/formats.md "Dataset cards" shows one card of each kind. Nothing here imports torch.
"""
