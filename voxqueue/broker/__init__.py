"""The broker: kombu's Redis transport made lossless (:mod:`~voxqueue.broker.transport`), its
take from several lists (:mod:`~voxqueue.broker.take`), the sweeps of dead workers' messages
(:mod:`~voxqueue.broker.sweeps`, :mod:`~voxqueue.broker.sweeper`) and the dead-letter lists."""
