// The normalised transaction and a family's lookup are the chains' (each family's lookup returns
// them); transaction lookup serves them.
export * from '../chains/transaction-view.js';
