// The error a put gets when another writer stored a child of the same parent
// first: the thread moved on without this writer, and nothing of its put was
// stored. The caller reloads the thread (getTuple) and decides again.

/** A second child of one checkpoint was refused: another writer owns the thread's next step. */
export class CheckpointConflict extends Error {
  override readonly name = "CheckpointConflict";
  constructor(
    readonly threadId: string,
    readonly checkpointNs: string,
    /** The checkpoint both writers continued from. */
    readonly parentId: string,
    /** The checkpoint this put tried to store, which was not stored. */
    readonly refusedId: string,
    /** The child stored first. */
    readonly storedChildId: string,
    cause?: unknown,
  ) {
    super(
      `checkpoint ${parentId} of thread ${JSON.stringify(threadId)} (namespace ${JSON.stringify(checkpointNs)}) ` +
        `already has the child ${storedChildId}; ${refusedId} was not stored`,
      { cause },
    );
  }
}
