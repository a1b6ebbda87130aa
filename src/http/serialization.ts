import SerializerSelector from '@fastify/fast-json-stringify-compiler';

type Factory = SerializerSelector.SerializerFactory;
type Serializer = SerializerSelector.Serializer;

const build: Factory = SerializerSelector();
const compiled = new Map<string, Serializer>();

/**
 * fastify's response serializers (fast-json-stringify), compiled once per process by what they
 * depend on: the schema, the shared schemas it may refer to, and the options. As with the
 * validators (validation.ts), a process that starts the API many times compiled them anew each
 * time. A serializer is a pure function of its input.
 */
export const cachedSerializerFactory: Factory = (externalSchemas, options) => {
  const compile = build(externalSchemas, options);
  const context = JSON.stringify([externalSchemas, options]);
  return (route) => {
    const key = `${context}${JSON.stringify(route.schema)}`;
    let serialize = compiled.get(key);
    if (!serialize) {
      serialize = compile(route);
      compiled.set(key, serialize);
    }
    return serialize;
  };
};
