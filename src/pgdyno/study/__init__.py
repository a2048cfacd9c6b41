"""Studies: a campaign with a question, its comparisons, and one report that answers it.

``spec`` reads the campaign file's ``[study]``; ``build`` turns the campaign's journal and
runs into a typed ``StudyRecord`` (model), with conclusions and threats derived by rule
(conclusions); ``report`` and ``plots`` word and draw it; ``run`` ties them to a campaign.
"""
